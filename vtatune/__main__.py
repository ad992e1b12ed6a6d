import sys

from vtatune.cli import main

status = main()
# A process that started VTA's tsim leaves through its exit hook (os._exit), which must be
# told the status: Python's exit hooks are not.
libvta = sys.modules.get("vtatune.deploy.runtime._libvta")
if libvta is not None:
    libvta.end_process(status)
raise SystemExit(status)
