"""Incremental ``multipart/form-data`` upload on top of python-multipart's callback parser.

Each part's data is written to its target file as it is parsed; nothing is buffered
beyond the parser's own boundary look-behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header

from bac_envd._errors import InvalidPath
from bac_envd._paths import PathResolver
from bac_envd._users import User
from bac_envd.transfer._writer import UploadError, UploadTarget


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class MultipartUpload:
    def __init__(
        self,
        content_type: str,
        user: User,
        resolve: PathResolver,
        query_path: str | None,
        metadata: dict[str, str],
    ) -> None:
        _, params = parse_options_header(content_type)
        boundary = params.get(b"boundary")
        if not boundary:
            raise UploadError(400, "error parsing multipart form: no multipart boundary param")
        self._user = user
        self._resolve = resolve
        self._query_path = query_path
        self._metadata = metadata
        self._written: list[str] = []
        self._sizes: list[int] = []
        self._headers: dict[str, bytes] = {}
        self._field = bytearray()
        self._value = bytearray()
        self._target: UploadTarget | None = None
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": lambda d, s, e: self._field.extend(d[s:e]),
                "on_header_value": lambda d, s, e: self._value.extend(d[s:e]),
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
            },
        )

    def _part_begin(self) -> None:
        self._headers = {}

    def _header_end(self) -> None:
        self._headers[bytes(self._field).decode("latin-1").lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        disposition = self._headers.get("content-disposition", b"")
        _, params = parse_options_header(disposition.decode("latin-1"))
        if params.get(b"name") != b"file":
            self._target = None  # other form fields are ignored
            return
        raw = self._query_path
        if raw is None:
            raw = _decode(params.get(b"filename", b""))
        try:
            path = self._resolve(raw)
        except InvalidPath as exc:
            raise UploadError(400, f"error resolving path: {exc}") from exc
        if path in self._written:
            others = ", ".join(p for p in self._written if p != path)
            message = (
                f"you cannot upload multiple files to the same path '{path}' in one upload "
                "request, only the first specified file was uploaded"
            )
            raise UploadError(400, message + (f", also uploaded: {others}" if others else ""))
        self._target = UploadTarget(path, self._user, self._metadata)
        self._written.append(path)

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._target is not None:
            self._target.write(data[start:end])

    def _part_end(self) -> None:
        if self._target is not None:
            target, self._target = self._target, None
            target.finish()
            self._sizes.append(target.size)

    async def run(self, body: AsyncIterator[bytes]) -> list[str]:
        """Parse the whole body; the resolved paths of the files written, in order."""
        try:
            async for chunk in body:
                self._parser.write(chunk)
        except MultipartParseError as exc:
            raise UploadError(400, f"error reading form: {exc}") from exc
        finally:
            if self._target is not None:
                self._target.close()
        if self._parser.state != MultipartState.END:
            raise UploadError(400, "error reading form: unexpected EOF")
        if not self._written:
            raise UploadError(400, "no file part named 'file' in the form")
        return self._written

    async def run_sized(self, body: AsyncIterator[bytes]) -> list[tuple[str, int]]:
        """``run``, each path with the bytes written to it."""
        paths = await self.run(body)
        return list(zip(paths, self._sizes, strict=True))
