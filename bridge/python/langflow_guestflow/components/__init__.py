"""Component bundles shipped by langflow-guestflow (declared in ../extension.json)."""
