from __future__ import annotations

from django.db import models


class Order(models.Model):
    email: models.EmailField[str, str] = models.EmailField()
    total_cents: models.PositiveIntegerField[int, int] = models.PositiveIntegerField()
    receipt: models.CharField[str, str] = models.CharField(max_length=200, blank=True)
