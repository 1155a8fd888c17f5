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
