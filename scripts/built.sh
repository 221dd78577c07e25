# Sourced by the scripts that build binaries into a cache folder (control_plane.sh, nvidia_tools.sh,
# nvidia_ctk.sh, real_node.sh): `built DIR STAMP FILE...` holds when DIR has a build of STAMP (the
# pinned versions its STAMP file names) with every FILE executable; the script then prints DIR and
# builds nothing.
built() {
  local dir=$1 stamp=$2 file
  shift 2
  [ -f "$dir/STAMP" ] && [ "$(cat "$dir/STAMP")" = "$stamp" ] || return 1
  for file in "$@"; do [ -x "$dir/$file" ] || return 1; done
}
