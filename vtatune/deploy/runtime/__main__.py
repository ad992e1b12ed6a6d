"""``python -m vtatune.deploy.runtime DIR ...``: a bundle run by the runtime part alone."""

from vtatune.deploy.runtime import end_process
from vtatune.deploy.runtime._command import main

status = main()
end_process(status)  # the status tsim's exit hook leaves with, when tsim was started
raise SystemExit(status)
