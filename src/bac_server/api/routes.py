"""The REST API as one Starlette application (every route of ``spec/openapi.yaml``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from bac_server.api import (
    artefacts,
    caps,
    checkpoints,
    fleet,
    health,
    network,
    sandboxes,
    secrets,
    streams,
    templates,
    trace,
    usage,
    volumes,
)
from bac_server.api import events as events_api
from bac_server.api import webhooks as webhooks_api
from bac_server.api.context import ApiSettings
from bac_server.api.errors import HANDLERS
from bac_server.control import ControlPlane

_ID = "/sandboxes/{sandbox_id:str}"
_TPL = "/templates/{template_id}"
_BUILD = _TPL + "/builds/{buildID}"
_HOOK = "/events/webhooks/{webhookID}"
_ART = "/artefacts/{runId}/{name}"
_VOL = "/volumes/{volumeID}"
_CONTENT = "/volumecontent/{volumeID}"
_SECRET = "/secrets/{secretID}"  # noqa: S105 (a path, not a password)

ROUTES = [
    Route("/health", health.health, methods=["GET"]),
    Route("/openapi.yaml", health.openapi, methods=["GET"]),
    Route("/sandboxes", sandboxes.create_sandbox, methods=["POST"]),
    Route("/v2/sandboxes", sandboxes.create_sandbox, methods=["POST"]),
    Route("/sandboxes", sandboxes.list_v1, methods=["GET"]),
    Route("/v2/sandboxes", sandboxes.list_v2, methods=["GET"]),
    Route("/sandboxes/metrics", sandboxes.many_metrics, methods=["GET"]),
    Route(_ID, sandboxes.get_sandbox, methods=["GET"]),
    Route(_ID, sandboxes.kill_sandbox, methods=["DELETE"]),
    Route(_ID + "/timeout", sandboxes.set_timeout, methods=["POST"]),
    Route(_ID + "/refreshes", sandboxes.refresh, methods=["POST"]),
    Route(_ID + "/connect", sandboxes.connect_v1, methods=["POST"]),
    Route("/v2" + _ID + "/connect", sandboxes.connect_v2, methods=["POST"]),
    Route(_ID + "/resume", sandboxes.resume, methods=["POST"]),
    Route(_ID + "/pause", sandboxes.pause_sandbox, methods=["POST"]),
    Route(_ID + "/snapshots", checkpoints.take_snapshot, methods=["POST"]),
    Route("/snapshots", checkpoints.list_snapshots, methods=["GET"]),
    Route("/v3/templates", templates.request_build, methods=["POST"]),
    Route("/templates", templates.list_templates_v1, methods=["GET"]),
    Route("/v2/templates", templates.list_templates_v2, methods=["GET"]),
    Route("/templates/aliases/{alias}", templates.get_alias, methods=["GET"]),
    Route("/templates/tags", templates.assign_tags, methods=["POST"]),
    Route("/templates/tags", templates.remove_tags, methods=["DELETE"]),
    Route(_TPL, templates.get_template, methods=["GET"]),
    Route(_TPL, templates.update_template, methods=["PATCH"]),
    Route("/v2" + _TPL, templates.update_template, methods=["PATCH"]),
    Route(_TPL + "/tags", templates.list_tags, methods=["GET"]),
    Route(_TPL + "/files/{hash}", templates.upload_link, methods=["GET"]),
    Route(_TPL + "/files/{hash}", templates.upload_files, methods=["PUT"]),
    Route("/v2" + _BUILD, templates.start_build, methods=["POST"]),
    Route(_BUILD + "/status", templates.build_status, methods=["GET"]),
    Route(_BUILD + "/logs", templates.build_logs, methods=["GET"]),
    Route(_BUILD, templates.cancel_build, methods=["DELETE"]),
    # Last: a snapshot's id may contain "/" (E2B's team/name:tag), so this takes the rest.
    Route("/templates/{template_id:path}", templates.delete_template, methods=["DELETE"]),
    Route(_ID + "/fork", checkpoints.fork, methods=["POST"]),
    Route(_ID + "/checkpoints", checkpoints.take_checkpoint, methods=["POST"]),
    Route(_ID + "/checkpoints", checkpoints.list_checkpoints, methods=["GET"]),
    Route(_ID + "/checkpoints/schedule", checkpoints.schedule_checkpoints, methods=["PUT"]),
    Route(_ID + "/checkpoints/{checkpoint_id}/restore", checkpoints.restore_checkpoint,
          methods=["POST"]),
    Route(_ID + "/checkpoints/{checkpoint_id}", checkpoints.delete_checkpoint, methods=["DELETE"]),
    Route(_ID + "/metrics", sandboxes.sandbox_metrics, methods=["GET"]),
    Route(_ID + "/network", network.update_network, methods=["PUT"]),
    Route(_ID + "/network", network.network_usage, methods=["GET"]),
    Route(_ID + "/streams", streams.issue_stream, methods=["POST"]),
    Route(_ID + "/logs", sandboxes.logs_v1, methods=["GET"]),
    Route("/v2" + _ID + "/logs", sandboxes.logs_v2, methods=["GET"]),
    Route("/events/sandboxes", events_api.team_events, methods=["GET"]),
    Route("/events" + _ID, events_api.sandbox_events, methods=["GET"]),
    Route("/events/webhooks", webhooks_api.create_webhook, methods=["POST"]),
    Route("/events/webhooks", webhooks_api.list_webhooks, methods=["GET"]),
    Route(_HOOK, webhooks_api.get_webhook, methods=["GET"]),
    Route(_HOOK, webhooks_api.update_webhook, methods=["PATCH"]),
    Route(_HOOK, webhooks_api.delete_webhook, methods=["DELETE"]),
    Route(_HOOK + "/deliveries", webhooks_api.list_deliveries, methods=["GET"]),
    Route(_HOOK + "/deliveries/{deliveryID}", webhooks_api.get_delivery, methods=["GET"]),
    Route(_HOOK + "/stats", webhooks_api.delivery_stats, methods=["GET"]),
    Route(_ID + "/trace", trace.sandbox_trace, methods=["GET"]),
    Route("/trace", trace.run_trace, methods=["GET"]),
    Route(_ID + "/usage", usage.sandbox_usage, methods=["GET"]),
    Route("/usage", usage.team_usage, methods=["GET"]),
    Route("/caps", caps.list_caps, methods=["GET"]),
    Route("/caps", caps.create_cap, methods=["POST"]),
    Route("/caps/{capID}", caps.get_cap, methods=["GET"]),
    Route("/caps/{capID}", caps.update_cap, methods=["PATCH"]),
    Route("/caps/{capID}", caps.delete_cap, methods=["DELETE"]),
    Route(_ID + "/artefacts", artefacts.promote, methods=["POST"]),
    Route("/artefacts", artefacts.list_artefacts, methods=["GET"]),
    Route(_ART, artefacts.download, methods=["GET"]),
    Route(_ART, artefacts.delete, methods=["DELETE"]),
    Route("/secrets", secrets.create_secret, methods=["POST"]),
    Route("/secrets", secrets.list_secrets, methods=["GET"]),
    Route(_SECRET, secrets.get_secret, methods=["GET"]),
    Route(_SECRET, secrets.update_secret, methods=["POST"]),
    Route(_SECRET, secrets.delete_secret, methods=["DELETE"]),
    Route("/volumes", volumes.create_volume, methods=["POST"]),
    Route("/volumes", volumes.list_volumes, methods=["GET"]),
    Route(_VOL, volumes.get_volume, methods=["GET"]),
    Route(_VOL, volumes.delete_volume, methods=["DELETE"]),
    Route(_CONTENT + "/file", volumes.read_file, methods=["GET"]),
    Route(_CONTENT + "/file", volumes.write_file, methods=["PUT"]),
    Route(_CONTENT + "/dir", volumes.list_dir, methods=["GET"]),
    Route(_CONTENT + "/dir", volumes.make_dir, methods=["POST"]),
    Route(_CONTENT + "/path", volumes.stat_path, methods=["GET"]),
    Route(_CONTENT + "/path", volumes.update_path, methods=["PATCH"]),
    Route(_CONTENT + "/path", volumes.remove_path, methods=["DELETE"]),
    Route("/admin/fleet/pause", fleet.pause, methods=["POST"]),
    Route("/admin/fleet/kill", fleet.kill, methods=["POST"]),
    Route("/admin/fleet/release", fleet.release, methods=["POST"]),
]


def build_api(
    plane: ControlPlane | None, settings: ApiSettings,
    more: Sequence[BaseRoute] = (), **starlette: Any
) -> Starlette:
    """The API app; ``starlette`` passes extra options (e.g. ``lifespan``) through;
    ``more``: routes served beside the API's, after them (the dashboard's).

    ``plane`` may be None and set later on ``app.state.plane`` by that lifespan."""
    app = Starlette(routes=[*ROUTES, *more], exception_handlers=dict(HANDLERS),
                    **starlette)
    app.state.plane = plane
    app.state.api_settings = settings
    return app
