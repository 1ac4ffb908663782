"""The Dockerfile converter: a Dockerfile's text into a template recipe's steps.

Stages, each a module: the text into instructions (``_syntax``: BuildKit's parser) and an
instruction's words (``_words``: BuildKit's shell lexer), both from e2b-dockerfile-utils;
the conversion's state (``_state``), then the instructions' handlers (``_convert``: FROM,
ARG, ENV, WORKDIR, USER and the dispatch; ``_copy``: RUN, COPY, ADD; ``_start``: CMD,
ENTRYPOINT, HEALTHCHECK). It depends on the step model only; ``Template.from_dockerfile``
is its caller.
"""

from bac._template._dockerfile._convert import DockerfileRecipe, parse_dockerfile

__all__ = ["DockerfileRecipe", "parse_dockerfile"]
