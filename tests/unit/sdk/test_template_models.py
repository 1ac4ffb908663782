"""The template API's answers as the SDK reads them: a failed build's reason included."""

from __future__ import annotations

from bac import BuildStatus, TemplateInfo


def test_a_failed_template_carries_why() -> None:
    """A template whose newest build failed reads with its reason, each build with its
    own; one from a server that sends none (E2B's) reads with None."""
    failed = TemplateInfo.from_api({
        "templateID": "t1", "buildID": "", "names": ["app"], "buildStatus": "error",
        "reason": {"message": "RUN failed with exit code 3", "step": "1"},
        "builds": [{"buildID": "b1", "status": "error",
                    "reason": {"message": "RUN failed with exit code 3"}},
                   {"buildID": "b0", "status": "ready"}]})
    assert (failed.build_status, failed.reason) == (BuildStatus.ERROR,
                                                    "RUN failed with exit code 3")
    assert [(b.build_id, b.reason) for b in failed.builds] == [
        ("b1", "RUN failed with exit code 3"), ("b0", None)]
    assert failed.to_json()["reason"] == "RUN failed with exit code 3"
    assert failed.to_json()["builds"][0]["reason"] == "RUN failed with exit code 3"
    plain = TemplateInfo.from_api({"templateID": "t2", "buildStatus": "ready"})
    assert plain.reason is None and plain.to_json()["reason"] is None
