from django.apps import AppConfig


class TasksLibraryConfig(AppConfig):
    name = "tasks_library"
    verbose_name = "Task library"
