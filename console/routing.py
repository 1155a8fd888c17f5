from django.urls import path

from console.consumers import RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<id:run_id>/", RunConsumer.as_asgi()),
]
