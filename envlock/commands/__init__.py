"""One module per sub-command; ``envlock.cli`` discovers them."""
