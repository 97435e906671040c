#!/bin/bash
exec taskset -c "$RANK" "$@"
