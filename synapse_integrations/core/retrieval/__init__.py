"""The read path: triggers -> model -> hybrid score -> signals -> gate -> items."""
