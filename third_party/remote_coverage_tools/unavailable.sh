#!/bin/sh
echo "remote_coverage_tools: coverage is not available in this offline build" >&2
exit 1
