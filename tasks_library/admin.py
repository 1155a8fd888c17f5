from django.contrib import admin

from tasks_library.models import EnvironmentVersion, Task, TaskSet, TaskVersion, TestSuiteVersion


@admin.register(TaskVersion)
class TaskVersionAdmin(admin.ModelAdmin):
    list_display = ["task", "number", "version", "verdict", "validated_at"]
    list_filter = ["verdict", "task__source"]
    search_fields = ["task__task_id", "content_hash"]
    list_select_related = ["task"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # versions are immutable: an edit is a new version


admin.site.register([EnvironmentVersion, Task, TaskSet, TestSuiteVersion])
