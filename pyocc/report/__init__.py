"""Ways to look at a memory plan: a picture (svg/html) and an explanation of
the peak. `timeline` turns lowered IR into plain data; `picture` and
`explain` only read that data."""
