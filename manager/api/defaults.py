"""Defaults of the API that more than the schema needs: the models declare them (and so the
CRDs), the CEL rules assume them where a field is absent, and the effective config falls back
on them for objects stored before a default existed. Written once, here."""

from typing import Final

CERTIFICATE_CHECK_INTERVAL: Final = "5m"
"""spec.appConfig.webhookConfig.certificateCheckInterval"""
CERTIFICATE_DURATION: Final = "8760h"
"""spec.appConfig.certManagerConfig.certificateDuration (one year)"""
CERTIFICATE_RENEW_BEFORE: Final = "30m"
"""spec.appConfig.certManagerConfig.certificateRenewBefore"""
REVISION_HISTORY_LIMIT: Final = 10
"""componentConfigs[].deploymentConfigs.revisionHistoryLimit"""
