#!/bin/bash
set -euo pipefail
echo "Hello, world!" > hello.txt
