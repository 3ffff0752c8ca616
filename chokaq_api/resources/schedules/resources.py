"""Recurring schedules (docs/schedules.md): list and inspect them with their next ticks and last outcome;
pause, resume and trigger them (operator); create, change and delete them (admin). Every change is
audited in its transaction."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from chokaq_api.auth import actor
from chokaq_api.extensions import Blueprint, store
from chokaq_api.resources.schedules.schemas import (
    ScheduleCreateSchema,
    SchedulePatchSchema,
    ScheduleQuery,
    ScheduleRunSchema,
    ScheduleSchema,
)
from chokaq_ops.schedules import with_next_runs as view

URL = "/schedules"
blp = Blueprint(
    "schedules", __name__, description="Recurring schedules: cron ticks that enqueue jobs, once per tick."
)


@blp.route("")
class Schedules(MethodView):
    @blp.arguments(ScheduleQuery, location="query")
    @blp.response(200, ScheduleSchema(many=True))
    @blp.paginate()
    def get(self, args: dict[str, Any], pagination_parameters: Any) -> Any:
        """Every schedule by name, with its next ticks and the outcome of its newest job; filter by type,
        paused, source"""
        page = store().list_schedules(
            **args, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = page.total
        return [view(s) for s in page.items]

    @blp.arguments(ScheduleCreateSchema)
    @blp.response(201, ScheduleSchema)
    @blp.alt_response(409, response="CONFLICT", description="A schedule with this name exists.")
    def post(self, body: dict[str, Any]) -> Any:
        """Create a schedule (admin; audited). A bad cron expression or time zone is a 422 naming `cron`
        or `tz`; its first tick is the first at or after now"""
        return view(store().create_schedule(body, actor=actor()))


@blp.route("/<name>")
class ScheduleByName(MethodView):
    @blp.response(200, ScheduleSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def get(self, name: str) -> Any:
        """One schedule"""
        return view(store().get_schedule(name))

    @blp.arguments(SchedulePatchSchema)
    @blp.response(200, ScheduleSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.alt_response(409, response="CONFLICT", description="Declared in code: change it there.")
    def patch(self, body: dict[str, Any], name: str) -> Any:
        """Change a schedule's definition (admin; audited with before/after). A new cron or time zone
        starts its ticks from now"""
        return view(store().update_schedule(name, body, actor=actor()))

    @blp.response(204)
    @blp.alt_response(404, response="NOT_FOUND")
    def delete(self, name: str) -> Any:
        """Delete a schedule and its run history (admin; audited). One declared in code comes back when a
        process that declares it starts"""
        store().delete_schedule(name, actor=actor())
        return None


@blp.route("/<name>/pause")
class PauseSchedule(MethodView):
    @blp.response(200, ScheduleSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, name: str) -> Any:
        """Stop a schedule's ticks until resumed (operator; audited)"""
        return view(store().pause_schedule(name, actor=actor()))


@blp.route("/<name>/resume")
class ResumeSchedule(MethodView):
    @blp.response(200, ScheduleSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, name: str) -> Any:
        """Run a paused schedule's ticks again, from the first at or after now (operator; audited)"""
        return view(store().resume_schedule(name, actor=actor()))


@blp.route("/<name>/trigger")
class TriggerSchedule(MethodView):
    @blp.response(201, ScheduleRunSchema)
    @blp.alt_response(404, response="NOT_FOUND")
    def post(self, name: str) -> Any:
        """Enqueue the schedule's job now, outside its ticks, paused or not (operator; audited with the
        job id)"""
        return store().trigger_schedule(name, actor=actor())


@blp.route("/<name>/runs")
class ScheduleRuns(MethodView):
    @blp.response(200, ScheduleRunSchema(many=True))
    @blp.alt_response(404, response="NOT_FOUND")
    @blp.paginate()
    def get(self, name: str, pagination_parameters: Any) -> Any:
        """The schedule's runs, newest tick first: each tick that ran and each trigger, its job and where
        that job is now"""
        page = store().schedule_runs(
            name, page=pagination_parameters.page, page_size=pagination_parameters.page_size
        )
        pagination_parameters.item_count = page.total
        return page.items
