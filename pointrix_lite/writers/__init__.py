"""Writers: where scalars, images and the config go (TensorBoard, JSON lines, console).

Importing this package registers the built-in writers in ``WRITERS``.
"""

from .base import Writer, WriterGroup, image_to_uint8
from .console import ConsoleWriter
from .jsonl import JsonlWriter
from .tensorboard import TensorboardWriter

__all__ = ["Writer", "WriterGroup", "image_to_uint8", "ConsoleWriter", "JsonlWriter", "TensorboardWriter"]
