"""PIL's `Image.show()` displays the image as a cell result, as E2B's interpreter does.

Outside a notebook `show()` hands the image to an external viewer program, of which a
sandbox has none. A viewer registered first in PIL's list instead calls IPython's
`display`, which sends the image as PNG (PIL images know how to render themselves). It is
registered when PIL's `ImageShow` module is first imported, which `show()` does itself.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from bac_kernel.inkernel._on_import import when_imported


def _register(image_show: ModuleType) -> None:
    class DisplayViewer(image_show.Viewer):  # type: ignore[misc, name-defined]
        """Shows an image by displaying it in the cell's output."""

        def show(self, image: Any, **options: Any) -> int:
            from IPython.display import display

            display(image)  # type: ignore[no-untyped-call]
            return 1  # shown: PIL asks no other viewer

    image_show.register(DisplayViewer, order=-1)


def install() -> None:
    when_imported("PIL.ImageShow", _register)
