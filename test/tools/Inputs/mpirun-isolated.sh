#!/bin/sh
# mpirun with a session directory of its own: Open MPI 4.1 creates
# $TMPDIR/ompi.<host>.<uid> racily, so two jobs started at once under one
# TMPDIR (lit runs tests in parallel with one TMPDIR) can fail with "File
# exists". As root, with Open MPI's consent variables; shared memory only.
dir=$(mktemp -d /tmp/fsdp-mpi.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
TMPDIR=$dir OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_btl=self,vader mpirun "$@"
