#!/usr/bin/env python3
"""The seed's Python handler logic on the same requests as examples/latency.rs: for each request,
json.loads of the body, then for each event the server stamp (eventTime, epoch seconds) and
json.dumps of the API Gateway event with the event object as body, kept in memory in place of
Kinesis. No validation and no eventId, as in the seed; the Rust handler does both on top.

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


def main():
    with open(sys.argv[1]) as f:
        requests = [json.loads(line) for line in f]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    events_per_request = len(json.loads(requests[0]["body"])["events"])
    for event in requests:  # warm-up
        handler(event, [])
    times = []
    for i in range(count):
        sink = []
        t = time.perf_counter()
        handler(requests[i % len(requests)], sink)
        times.append((time.perf_counter() - t) * 1e6)
    # Handler time only, as examples/latency.rs counts it: not the loop around it.
    seconds = sum(times) / 1e6
    times.sort()
    print(
        f"python seed handler ({sys.version.split()[0]}): {count} requests of {events_per_request} events "
        f"in {seconds:.2f} s: {count * events_per_request / seconds:.0f} events/s"
    )
    print(
        "  per request (µs): p50 {:.1f}, p90 {:.1f}, p99 {:.1f}, p99.9 {:.1f}, max {:.1f}".format(
            percentile(times, 50), percentile(times, 90), percentile(times, 99), percentile(times, 99.9), times[-1]
        )
    )


if __name__ == "__main__":
    main()
