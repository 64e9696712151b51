"""Stand-in for the ``lfx`` package (see ../README.md). Not the real lfx."""

STAND_IN = True
