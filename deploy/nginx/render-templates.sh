#!/bin/sh
# /etc/nginx/templates/NAME.template -> /etc/nginx/conf.d/NAME with its ${VARIABLES} filled in from
# the environment (only the ones it names: nginx's own $variables stay), then exec the command.
# An unset variable stops the container with its name rather than starting nginx on a broken config.
set -eu
for template in /etc/nginx/templates/*.template; do
    [ -e "$template" ] || continue
    names=$(grep -o '\${[A-Za-z_][A-Za-z0-9_]*}' "$template" | sort -u | tr -d '${}')
    for name in $names; do
        eval "value=\${$name-}"
        [ -n "$value" ] || { echo "render-templates: $template needs \$$name; set it in the environment" >&2; exit 1; }
    done
    out="/etc/nginx/conf.d/$(basename "$template" .template)"
    envsubst "$(printf '${%s} ' $names)" < "$template" > "$out"
    echo "render-templates: $template -> $out"
done
exec "$@"
