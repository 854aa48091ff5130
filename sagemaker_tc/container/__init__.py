"""Container side: the launcher the training toolkit runs in place of the user's script."""
