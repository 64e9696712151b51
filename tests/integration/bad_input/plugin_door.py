"""One call of the Langflow plugin's sandbox backend, as Langflow makes it, for the C++
bad-input test: ``plugin_door.py CASE_JSON`` with GUESTFLOW_URL / GUESTFLOW_TOKEN (and the
case's LANGFLOW_SANDBOX_* settings) in the environment. Prints one JSON line:
``{"raised": "<exception class>", "code": "<error code the server gave>", "message"}`` or
``{"result": {stdout, stderr, exit_code}}``.
"""

from __future__ import annotations

import json
import re
import sys

from langflow_guestflow.backend import GuestflowSandboxBackend


def main() -> int:
    case = json.loads(sys.argv[1])
    try:
        backend = GuestflowSandboxBackend.connect()
        result = backend.run(case.get("code", "print('never')\n"), env=case.get("env"))
    except Exception as exc:  # noqa: BLE001 - the test asserts on what was raised
        message = str(exc)
        code = re.search(r"\((\w+)\)\s*$", message)
        print(json.dumps({"raised": type(exc).__name__, "code": code.group(1) if code else "", "message": message}))
        return 0
    print(json.dumps({"result": {"stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
