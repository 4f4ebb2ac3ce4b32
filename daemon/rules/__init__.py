"""Pure, typed decisions with no I/O: what a figure, a quote, a verdict or a citation is worth."""
