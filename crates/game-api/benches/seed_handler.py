#!/usr/bin/env python3
"""The seed's Python handler logic on the same requests as examples/latency.rs: for each request,
json.loads of the body, then for each event the server stamp (eventTime, epoch seconds) and
json.dumps of the API Gateway event with the event object as body, kept in memory in place of
Kinesis. No validation and no eventId, as in the seed; the Rust handler does both on top.

Each request is timed on the wall clock and on the thread's CPU clock, as in examples/latency.rs.

usage: seed_handler.py REQUESTS.jsonl [REQUESTS_TO_RUN]
"""
import json
import sys
import time


def handler(event, sink):
    body = json.loads(event["body"])
    events = body["events"] if isinstance(body, dict) and "events" in body else [body]
    for game_event in events:
        game_event["eventTime"] = int(time.time())
        record = dict(event)
        record["body"] = game_event
        sink.append(json.dumps(record).encode())


def percentile(values, p):
    rank = max(1, min(len(values), -(-len(values) * p // 100)))
    return values[int(rank) - 1]


def report(clock, micros, events_per_request):
    """events/s from the summed request times, and their percentiles, in µs."""
    seconds = sum(micros) / 1e6
    micros = sorted(micros)
    print(
        f"  {clock}: {seconds:.2f} s, {len(micros) * events_per_request / seconds:.0f} events/s; "
        "per request (µs): p50 {:.1f}, p90 {:.1f}, p99 {:.1f}, p99.9 {:.1f}, max {:.1f}".format(
            percentile(micros, 50), percentile(micros, 90), percentile(micros, 99), percentile(micros, 99.9), micros[-1]
        )
    )


def main():
    with open(sys.argv[1]) as f:
        requests = [json.loads(line) for line in f]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    events_per_request = len(json.loads(requests[0]["body"])["events"])
    for event in requests:  # warm-up
        handler(event, [])
    wall, cpu = [], []
    for i in range(count):
        sink = []
        cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
        handler(requests[i % len(requests)], sink)
        wall.append((time.perf_counter_ns() - wall_start) / 1e3)
        cpu.append((time.thread_time_ns() - cpu_start) / 1e3)
    # Handler time only, as examples/latency.rs counts it: not the loop around it.
    print(f"python seed handler ({sys.version.split()[0]}): {count} requests of {events_per_request} events")
    report("wall clock", wall, events_per_request)
    report("thread CPU", cpu, events_per_request)


if __name__ == "__main__":
    main()
