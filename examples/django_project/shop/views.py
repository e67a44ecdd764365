from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from django_mongodb_backend import transaction

from dogs_core import Scheduled
from dogs_integrations.django import schedule_on_commit
from shop.jobs import send_receipt
from shop.models import Order


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """The order and its receipt job commit together, or neither does."""
    with transaction.atomic():
        order = Order.objects.create(email=request.POST["email"], total_cents=0)
        scheduled = schedule_on_commit(send_receipt, {"order_id": str(order.pk)})
        order.total_cents = int(request.POST["total_cents"])
        if order.total_cents < 0:  # raised after the job was written: both roll back
            raise ValueError(f"bad total: {order.total_cents}")
        order.save(update_fields=["total_cents"])
    job = scheduled.outcome.id if isinstance(scheduled.outcome, Scheduled) else None
    return JsonResponse({"order": str(order.pk), "job": job, "written": scheduled.mode})


def order(request: HttpRequest, pk: str) -> JsonResponse:
    found = Order.objects.get(pk=pk)
    return JsonResponse({"order": pk, "receipt": found.receipt or None})
