"""The jobs of the shop app, found by Dogs in this module's ``jobs`` registry."""

from dogs_core import JobContext, Jobs

jobs = Jobs()


@jobs.event(max_tries=5)
def send_receipt(params: dict[str, str], ctx: JobContext) -> str:
    """A sync handler (it runs in a worker thread), so it may use the ORM."""
    from shop.models import Order

    order = Order.objects.get(pk=params["order_id"])
    order.receipt = f"receipt for {order.total_cents / 100:.2f} EUR sent to {order.email}"
    order.save(update_fields=["receipt"])
    ctx.logger.info("order %s: %s", order.pk, order.receipt)
    return str(order.receipt)
