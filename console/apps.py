from django.apps import AppConfig
from django.urls import register_converter


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Operations console"

    def ready(self) -> None:
        # Before any URL conf is loaded (they load lazily): routes take ids as <id:...>, bounded
        # to what the database stores (core/bounds.py).
        from core.bounds import IdConverter  # noqa: PLC0415

        register_converter(IdConverter, "id")

        # A committed write to a row the console shows drops the web tier's kept answers
        # (core/response_cache.py), however it was written.
        from django.db.backends.signals import connection_created  # noqa: PLC0415

        from core.response_cache import watch_connection  # noqa: PLC0415

        connection_created.connect(watch_connection, dispatch_uid="response-cache-writes")
