"""The dashboard's pages: each module has ``TEMPLATE`` and ``async def load(ctx, **params) -> dict``
(the template's variables), reading only through ``ctx`` (the signed-in user's service calls)."""
