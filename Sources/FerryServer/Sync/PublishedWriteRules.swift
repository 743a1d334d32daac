import FerryAppConfig
import FerryCore

extension AppConfiguration {
    /// What the server tells one user's session of its write rules (SPEC F-PRECHECK): per
    /// class of the schema, the role that applies to the user with `%%user` values expanded
    /// (so the device needs no user data), and the fields its subscriptions may use, exactly
    /// as `SessionView.make` enforces them. Built from the same rules `UploadIntegration`
    /// validates with, so a device's check agrees with the server while the rules stay put.
    func publishedWriteRules(for user: UserContext, schema: Schema) -> WriteRules {
        WriteRules(classes: schema.classes.filter { !$0.isAsymmetric && !sync.asymmetricTables.contains($0.name) }.map { os in
            let role = (rules(for: os.name) ?? CollectionRules(roles: [])).role(for: user)?.expanded(for: user)
            var fields = [os.primaryKey.name]
            for f in sync.queryableFields + (sync.collectionQueryableFields[os.name] ?? []) where !fields.contains(f) { fields.append(f) }
            return ClassWriteRules(objectType: os.name, role: role, queryableFields: fields)
        })
    }
}
