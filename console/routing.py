from django.urls import path

from console.consumers import RunConsumer
from console.group_consumers import EnvironmentBuildConsumer, RunsTableConsumer

websocket_urlpatterns = [
    path("ws/runs/", RunsTableConsumer.as_asgi()),
    path("ws/runs/<id:run_id>/", RunConsumer.as_asgi()),
    path("ws/environments/<id:environment_id>/", EnvironmentBuildConsumer.as_asgi()),
]
