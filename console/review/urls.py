"""Routes of the human review pages (included from console/urls.py)."""

from django.urls import path

from console.review import api, views

urlpatterns = [
    path("review/", views.review_home, name="review-home"),
    path("review/queues/new/", views.review_queue_new, name="review-queue-new"),
    path("review/queues/<id:queue_id>/", views.review_queue, name="review-queue"),
    path("review/items/<id:item_id>/", views.review_item, name="review-item"),
    path("review/items/<id:item_id>/label/", views.review_item_label, name="review-item-label"),
    path("review/items/<id:item_id>/assign/", views.review_item_assign, name="review-item-assign"),
    path(
        "review/items/<id:item_id>/confirm/", views.review_item_confirm, name="review-item-confirm"
    ),
    path("review/items/<id:item_id>/draft/", views.review_item_draft, name="review-item-draft"),
    path("review/drafts/<id:draft_id>/", views.review_draft, name="review-draft"),
    path(
        "review/drafts/<id:draft_id>/submit/",
        views.review_draft_submit,
        name="review-draft-submit",
    ),
    path(
        "review/tasks/<id:task_version_id>/", views.task_version_labels, name="review-task-labels"
    ),
    path("runs/<id:run_id>/review/", views.run_review_summary, name="run-review"),
    path("api/review/queues/", api.QueueListApi.as_view(), name="api-review-queues"),
    path("api/review/queues/<id:queue_id>/", api.QueueApi.as_view(), name="api-review-queue"),
    path(
        "api/review/items/<id:item_id>/label/",
        api.ItemLabelApi.as_view(),
        name="api-review-item-label",
    ),
    path(
        "api/review/items/<id:item_id>/confirm/",
        api.ItemConfirmApi.as_view(),
        name="api-review-item-confirm",
    ),
]
