from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "console.review"
    label = "review"
    verbose_name = "Spot-check review"
