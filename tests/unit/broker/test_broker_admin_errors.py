"""The controller channel answers with one exception type whether the active controller is this
node's own service or another node's."""

from __future__ import annotations

import pytest

from kraft.broker.admin import LocalAdmin
from kraft.controller.channel import ControllerChannel
from kraft.errors import KraftError
from kraft.metadata.errors import MetadataError


class ActiveControllerHere:
    """This node's ControllerService as the active controller: its rules raise MetadataError."""

    is_active = True

    async def create_topics(self, name: str, *args: object, **kwargs: object) -> None:
        raise MetadataError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")


async def test_a_creation_race_lost_on_the_active_controller_is_a_kraft_error() -> None:
    """A FindCoordinator that lost the race to create __consumer_offsets on the active
    controller answered TOPIC_ALREADY_EXISTS to the client: its caller catches only KraftError."""
    channel = ControllerChannel(ActiveControllerHere(), client=None, loader=None, settings=None)  # type: ignore[arg-type]
    admin = LocalAdmin(channel, view=None, delete_topic_enable=True)  # type: ignore[arg-type]
    with pytest.raises(KraftError) as raised:
        await admin.create_topic("__consumer_offsets", 50, 3, {})
    assert raised.value.error_code == "TOPIC_ALREADY_EXISTS"
