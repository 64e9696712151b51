"""Stand-in ``deerflow`` (bytedance/deer-flow, ``backend/packages/harness/deerflow``): the
sandbox seam the Guestflow provider implements and the config it reads (SOURCES.md names
each real file and the revision read)."""
