"""Stand-in ``deerflow`` (bytedance/deer-flow, ``backend/packages/harness/deerflow``): only the
sandbox seam the Guestflow provider implements."""
