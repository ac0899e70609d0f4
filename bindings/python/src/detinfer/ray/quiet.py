"""What the command does to keep Ray's own chatter off its output, with the
settings Ray offers: the driver's Python loggers at WARNING (ray.init's
logging_level, Ray Data's console handler), Ray Data's start-of-execution
lines off (DataContext.print_on_execution_start), and with --no-progress no
warning that progress bars are off (the user asked for that). Left as Ray
prints them: its security warnings and errors, among them one line per run
from Ray Data's actor pool about constructor arguments in the object store
(ray-project/ray issue 53727), which only Ray's C++ log level would hide,
with everything else it logs."""

from __future__ import annotations

import logging
from typing import Any, Dict

_PROGRESS_OFF = "Progress bars disabled"


def init_options() -> Dict[str, Any]:
    """ray.init keyword arguments."""
    return {"logging_level": logging.WARNING}


class _DropProgressOff(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_PROGRESS_OFF)


def after_init(progress: bool) -> None:
    """Ray Data's console at WARNING, no start-of-execution lines, and without
    progress bars no warning about it."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    if hasattr(ctx, "print_on_execution_start"):
        ctx.print_on_execution_start = False
    for handler in logging.getLogger("ray.data").handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)
            if not progress:
                handler.addFilter(_DropProgressOff())
