"""Routes of the trajectory replay and the trajectory lists (pages and JSON API)."""

from django.urls import path

from console import replay_views as views

urlpatterns = [
    path("trajectories/", views.trajectory_list, name="trajectory-list"),
    path("runs/<id:run_id>/trajectories/", views.run_trajectory_list, name="run-trajectory-list"),
    path(
        "runs/<id:run_id>/trajectories/<id:trajectory_id>/",
        views.trajectory_detail,
        name="trajectory-detail",
    ),
    path("api/trajectories/", views.TrajectoryListApi.as_view(), name="api-trajectories"),
    path(
        "api/runs/<id:run_id>/trajectories/",
        views.RunTrajectoryListApi.as_view(),
        name="api-run-trajectories",
    ),
    path(
        "api/runs/<id:run_id>/trajectories/<id:pk>/",
        views.TrajectoryApi.as_view(),
        name="api-trajectory",
    ),
    path(
        "api/runs/<id:run_id>/trajectories/<id:pk>/turns/",
        views.TrajectoryTurnsApi.as_view(),
        name="api-trajectory-turns",
    ),
]
