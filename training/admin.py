from django.contrib import admin

from training.models import StepMetric, TrainingRun


@admin.register(TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ["id", "task_set", "status", "backend", "total_steps", "created_at"]
    list_filter = ["status", "backend"]
    readonly_fields = [
        "status",
        "status_reason",
        "backend_ref",
        "summary",
        "started_at",
        "finished_at",
    ]


@admin.register(StepMetric)
class StepMetricAdmin(admin.ModelAdmin):
    list_display = ["run", "step", "reward_mean", "recorded_at"]
    list_filter = ["run"]
