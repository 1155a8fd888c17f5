from django.contrib import admin
from django.urls import path

from console import views

urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("healthz", views.healthz, name="healthz"),
    path("runs/<int:run_id>/", views.run_detail, name="run-detail"),
    path("api/runs/<int:run_id>/steps/", views.RunStepsApi.as_view(), name="api-run-steps"),
    path("admin/", admin.site.urls),
]
