#!/bin/bash
# Runs in the workdir before the step's agent starts (Harbor's steps/<name>/workdir/setup.sh).
echo "extend step prepared" > /app/.setup-ran
