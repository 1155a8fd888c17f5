"""Routes of the live dashboard's other pages (console.dashboard_views); included by
console/urls.py."""

from django.urls import path

from console import dashboard_views as views

urlpatterns = [
    path("runs/new/", views.run_launch, name="run-launch"),
    path("runs/compare/", views.run_compare, name="run-compare"),
    path("runs/<id:run_id>/resume/", views.run_resume, name="run-resume"),
    path("api/runs/<id:run_id>/components/", views.run_components_api, name="api-run-components"),
    path("api/runs/<id:run_id>/metrics/", views.run_metrics_api, name="api-run-metrics"),
    path("api/sandboxes/pool/", views.sandbox_pool_api, name="api-sandbox-pool"),
    path("sandboxes/", views.sandbox_pool, name="sandbox-pool"),
]
