"""Routes of the trajectory replay and the trajectory lists (pages and JSON API)."""

from django.urls import path

from console import replay_views as views

urlpatterns = [
    path("trajectories/", views.trajectory_list, name="trajectory-list"),
    path("runs/<int:run_id>/trajectories/", views.run_trajectory_list, name="run-trajectory-list"),
    path(
        "runs/<int:run_id>/trajectories/<int:trajectory_id>/",
        views.trajectory_detail,
        name="trajectory-detail",
    ),
    path("api/trajectories/", views.TrajectoryListApi.as_view(), name="api-trajectories"),
    path(
        "api/runs/<int:run_id>/trajectories/",
        views.RunTrajectoryListApi.as_view(),
        name="api-run-trajectories",
    ),
    path(
        "api/runs/<int:run_id>/trajectories/<int:pk>/",
        views.TrajectoryApi.as_view(),
        name="api-trajectory",
    ),
    path(
        "api/runs/<int:run_id>/trajectories/<int:pk>/turns/",
        views.TrajectoryTurnsApi.as_view(),
        name="api-trajectory-turns",
    ),
]
