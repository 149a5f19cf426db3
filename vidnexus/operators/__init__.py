"""CPU operators (pure logic objects over frames and crops)."""

from vidnexus.operators.hud import HudCells

__all__ = ["HudCells"]
