"""Curation pages and the task library API. Task ids hold slashes (``HumanEval/0``): the
``path`` converter takes them, so the routes with a suffix come before the bare one."""

from django.urls import path

from tasks_library import api, environment_views, environments_api, views

urlpatterns = [
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/<path:task_id>/edit/", views.task_edit, name="task-edit"),
    path("tasks/<path:task_id>/validate/", views.task_validate, name="task-validate"),
    path("tasks/<path:task_id>/curate/", views.task_curate, name="task-curate"),
    path("tasks/<path:task_id>/", views.task_detail, name="task-detail"),
    path("environments/", environment_views.environment_list, name="environment-list"),
    path(
        "environments/<id:environment_id>/",
        environment_views.environment_detail,
        name="environment-detail",
    ),
    path(
        "api/environments/", environments_api.EnvironmentListApi.as_view(), name="api-environments"
    ),
    path(
        "api/environments/<id:environment_id>/",
        environments_api.EnvironmentApi.as_view(),
        name="api-environment",
    ),
    path(
        "api/environments/<id:environment_id>/versions/",
        environments_api.EnvironmentVersionsApi.as_view(),
        name="api-environment-versions",
    ),
    path(
        "api/environments/<id:environment_id>/build/",
        environments_api.EnvironmentBuildApi.as_view(),
        name="api-environment-build",
    ),
    path("tasksets/", views.taskset_list, name="taskset-list"),
    path("tasksets/<str:name>/", views.taskset_detail, name="taskset-detail"),
    path("api/task-versions/", api.TaskVersionListApi.as_view(), name="api-task-versions"),
    path("api/task-versions/quarantine/", api.QuarantineApi.as_view(), name="api-quarantine"),
    path("api/task-versions/approve/", api.ApproveApi.as_view(), name="api-approve"),
    path("api/task-versions/validate/", api.ValidateApi.as_view(), name="api-validate"),
    path(
        "api/validation-jobs/<id:job_id>/",
        api.ValidationJobApi.as_view(),
        name="api-validation-job",
    ),
    path(
        "api/tasks/<path:task_id>/versions/<id:number>/files/",
        api.WorkspaceFilesApi.as_view(),
        name="api-task-version-files",
    ),
    path(
        "api/tasks/<path:task_id>/versions/<id:number>/",
        api.TaskVersionApi.as_view(),
        name="api-task-version",
    ),
    path(
        "api/tasks/<path:task_id>/versions/",
        api.TaskVersionsApi.as_view(),
        name="api-task-versions-of",
    ),
    path("api/tasks/<path:task_id>/diff/", api.TaskDiffApi.as_view(), name="api-task-diff"),
    path("api/tasks/<path:task_id>/", api.TaskApi.as_view(), name="api-task"),
    path("api/task-sets/", api.TaskSetListApi.as_view(), name="api-task-sets"),
    path("api/task-sets/<str:name>/pin/", api.TaskSetPinApi.as_view(), name="api-task-set-pin"),
    path("api/task-sets/<str:name>/", api.TaskSetApi.as_view(), name="api-task-set"),
]
