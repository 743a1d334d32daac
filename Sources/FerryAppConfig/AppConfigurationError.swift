/// A problem in an app directory, naming the file and what is wrong with it, so a bad
/// configuration fails at start with a message a person can act on.
public struct AppConfigurationError: Error, CustomStringConvertible, Sendable {
    public let file: String
    public let problem: String

    public init(file: String, _ problem: String) {
        self.file = file
        self.problem = problem
    }

    public var description: String { "\(file): \(problem)" }
}
