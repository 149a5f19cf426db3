"""Operators, generic over apps: the chain API (``chain``) and what runs it, and CPU operators over
frames and crops (motion tracking in ``cv`` and ``tracking``, ``windows``). An app's own operators
live in its package (the HUD cell cropper: :mod:`vidnexus.apps.hud.cells`)."""
