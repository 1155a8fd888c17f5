from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from console import api, apikey_views, metrics_views, views

urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("healthz", views.healthz, name="healthz"),
    path("livez", views.livez, name="livez"),
    path("favicon.svg", views.favicon, name="favicon"),
    path("favicon.ico", views.favicon, name="favicon-ico"),
    path("metrics", metrics_views.metrics, name="metrics"),
    path("runs/<id:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<id:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<id:run_id>/edit/", views.run_edit, name="run-edit"),
    path(
        "runs/<id:run_id>/alerts/<id:alert_id>/ack/",
        views.alert_acknowledge,
        name="alert-acknowledge",
    ),
    path("api/runs/", api.RunListApi.as_view(), name="api-runs"),
    path("api/runs/<id:run_id>/", api.RunApi.as_view(), name="api-run"),
    path("api/runs/<id:run_id>/cancel/", api.RunCancelApi.as_view(), name="api-run-cancel"),
    path("api/runs/<id:run_id>/resume/", api.RunResumeApi.as_view(), name="api-run-resume"),
    path("api/runs/<id:run_id>/steps/", views.RunStepsApi.as_view(), name="api-run-steps"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("accounts/login/", views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/api-keys/", apikey_views.api_keys, name="api-keys"),
    path(
        "account/api-keys/<id:key_id>/revoke/",
        apikey_views.api_key_revoke_view,
        name="api-key-revoke",
    ),
    path("", include("tasks_library.urls")),
    path("", include("console.replay_urls")),
    path("", include("console.review.urls")),
    path("", include("console.dashboard_urls")),
    path("admin/", admin.site.urls),
]

handler403 = "console.views.permission_denied"
handler404 = "console.views.not_found"
